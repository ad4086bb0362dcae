"""Chat models: one module per provider behind one small protocol.

    base        ChatModel, Completion and Usage; SDKBackend, what every SDK-backed model shares
    openai      OpenAI (and, in registry, any OpenAI-compatible server)
    anthropic   Anthropic
    gemini      Google Gemini
    registry    make_model: the model a spec ("provider:model") names, with its key and server
    quirks      what a model's 400s taught about its requests, kept by the model
    discovery   a compatible server's context window, asked of the server
    siblings    the cheaper sibling of a model: the price ladder the flows hand run_config

Provider errors become signals at one boundary (core.signals.translate_errors).
"""

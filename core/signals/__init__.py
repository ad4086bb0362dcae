"""Provider errors as typed signals: what tasks retry, shrink or fail on.

    Signal
    ├── ContextOverflow   the request is bigger than the model (or one minute's budget) allows:
    │                     shrink the context and call again, never sleep (core.overflow)
    ├── RateLimited       wait (retry_after when the provider said it) and retry
    ├── Transient         a passing fault: retry with backoff
    ├── Fatal             configuration, auth, billing, bad request: fail now, say what to fix
    └── BudgetExceeded    our own spending cap, raised before a call that would cross it:
                          never retried, the topic stops (core.accounting.ledger raises it)

The modules, in the order a provider error travels through them:

    taxonomy          the signal classes and their fields
    classify          exception (or status, body, headers) -> signal; `translate_errors` is
                      the one boundary every provider's SDK call is wrapped in
    sdk_errors        which SDK raised an exception, which host it spoke to, transport failures
    bodies            reading an error body: every string, retry hints, masking
    overflow_numbers  the numbers of an overflow in any server's wording: limit, prompt,
                      output, and which side to cut; output caps
    errors            exceptions that survive pickling with their fields (signals, page faults)

Who acts on them: tasks/retry.py (Prefect retries), core/overflow (shrinking),
core/topics/failures.py (the one line a failed topic reports). Import from here; the modules are
the implementation.
"""

from core.signals.classify import (BodyFacts, OverflowNumbers, classify, classify_payload,
                                   mask_secrets, output_cap, overflow_numbers, parse_duration,
                                   read_body, retry_after, retry_after_from_headers,
                                   tokens_per_minute, translate_errors)
from core.signals.taxonomy import (BudgetExceeded, ContextOverflow, Fatal, RateLimited, Signal,
                                Transient)

__all__ = ["Signal", "ContextOverflow", "RateLimited", "Transient", "Fatal", "BudgetExceeded",
           "classify", "classify_payload", "translate_errors", "BodyFacts", "read_body",
           "OverflowNumbers", "overflow_numbers", "output_cap", "parse_duration", "retry_after",
           "retry_after_from_headers", "tokens_per_minute", "mask_secrets"]

"""What a topic asks and whether the evidence answers it, judged in code for every engine.

    question.py   the shape of a question from its text: parts, options, purpose, whether it
                  asks for a recommendation
    subject.py    the subject (the words the corpus knows it by, rarest first; the words it
                  never uses) and the parts, named in the topic's own words
    about.py      whether a text is about a subject: it, its page's title or its section
                  names it
    plan.py       any engine's plan tied to those parts
    gate.py       before a report is written: each part answered or not; evidence off the
                  subject removed; no part answered, no report (NoEvidence)

Words most pages share never decide relevance; meaning and word overlap only rank what already
is about the subject.
"""

"""Topics: what happens to a topic around its research, in rules the flows apply.

    rows         a CSV of topics read: every good row a Topic, every bad one a RowError
    plan_edits   a plan as a person reviews it, and the plan their answer makes
    waves        the supervisor's waves: what a wave leaves open, how many follow-ups the
                 budget allows, the findings regrouped into the report's sections
    failures     why a topic (or a batch) failed, in one line a user can act on; which
                 failures are expected (no traceback) and which are bugs

Nothing here imports Prefect: the flows (flows/topic.py, flows/batch.py) call these.
"""

"""The paper's whole protocol as one declarative, resumable experiment.

An experiment file (TOML, :mod:`protocol.config`) names a dataset, users, methods, a baseline, the tasks
(build, restatement, proposal, selection, dialogue, faireval), the role endpoints, k, seeds, and concurrency and
rate limits per endpoint. :mod:`protocol.plan` turns it into job units (:mod:`protocol.units`) with LLM calls,
tokens, cost and time estimated; :mod:`protocol.report` reads back exactly the records those units produced and
renders the paper's tables. Running is the job engine's (``pal experiment run``); this package stays below the
composition root and constructs nothing.
"""

"""The job engine: long work (memory builds, simulations, judging, single-turn tasks, PersonaMem, generation,
whole experiments) as persisted units that worker threads — or Ray tasks — run whether or not a page is open.

A *job* is a set of *units* in the run store (``jobs``/``job_units``/``job_deps``, :mod:`jobs.schema`). A unit is
one resumable piece of domain work named by a registered *kind* (``memory.session``, ``sim.run``…); its function
is wired by the composition root (:mod:`studio.units`), so this package knows nothing of the domains and sits
just above ``backends`` in the layer table. A unit is ``running`` only while a worker holds its lease, renewed by
a heartbeat; a unit whose worker died goes back to ``queued`` (at the next start of an engine on that host, or
when its lease expires) and is run again — the domains' own resume (stages, utterances, judgment keys) makes
that redo nothing already finished.
"""

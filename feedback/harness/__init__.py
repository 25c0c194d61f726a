"""The learning harnesses: does the graph learn? Measured from outside the product, through its API.

Nothing in the product imports this package (tests/test_layering.py checks it); the management
commands ``simulate_sessions``, ``evaluate_learning``, ``evaluate_all`` and ``rundemo`` do.

- ``config``: what a run is given (``WorldConfig``, ``HistoryConfig``, ``EvaluationConfig``, the
  questions file, ``--set`` pairs) and ``EvaluationError``.
- ``agent``: the simulated agent (what it reports after a context answer).
- ``scoring``: the one scorer (hit@5, recall@5, MRR@5, reciprocal rank) and ``mean``.
- ``report``: what a run measured (``WorldReport``, ``HistoryReport``, ``EvaluationReport``).
- ``inprocess``: the in-process API client and Celery's eager mode (world and history only).
- ``world``: the synthetic world with a hidden ground truth and its frozen twin (``simulate_sessions``).
- ``history``: the demo's weeks of simulated sessions (``demo.fill_demo_history``).
- ``demo``: the demo organization, users and graph that ``make run`` opens on.
- ``evaluation``: a learning graph against its frozen twin over HTTP only (``evaluate_learning``).
- ``plots``: their PNG and HTML plots.
"""

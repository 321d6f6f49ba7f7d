"""Govern an existing Slurm from the budget tree (docs/slurm.md).

- ``names``: account names Slurm can take, derived deterministically from the tree.
- ``plan``: pure Python — desired vs current associations/QOS → an ordered list of
  ``sacctmgr`` changes (unit-testable without Slurm).
- ``client``: runs ``sacctmgr``/``sacct`` for one ``SlurmConnection`` and parses their
  parsable output.
- ``sync``: ``slurm_sync`` — read, plan, print, apply (``manage.py slurm_sync``).
- ``usage``: ``slurm_usage_import`` — ``sacct`` jobs → the usage ledger and owed figures
  (``manage.py slurm_import_usage``).
"""

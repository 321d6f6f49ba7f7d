"""Writes of the live scheduler: keyword-only ``<entity>_<action>`` functions.

Modules: ``workloads`` (submit, cancel), ``runs`` (how a run ends), ``cycle`` (a scheduling
cycle around the engine), ``usage`` (the ledger and its rollup), ``nodes`` (operator actions,
heartbeat expiry), ``executor_reports`` (what agents and executors report). See
docs/live-loop.md for the contract with the executors and APIs.
"""

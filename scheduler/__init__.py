"""The scheduling engine (pure Python, ``scheduler.engine``), the simulator and the live driver."""

"""GPU utilization on the pages: cluster health, owed vs delivered, the usage report and its
exports, a workload's page, and the day sums they read (``world.py`` holds the day).
"""

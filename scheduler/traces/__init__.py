"""Real workload traces shipped with the product (see NOTICE at the repository root).

``philly.csv.gz``: Microsoft Philly jobs (CC BY 4.0); ``philly_vc.csv``: Philly virtual
cluster sizes in 8-GPU nodes (MIT, Helios artifact).
"""

from pathlib import Path

TRACES_DIR = Path(__file__).resolve().parent
PHILLY_JOBS = TRACES_DIR / "philly.csv.gz"
PHILLY_VCS = TRACES_DIR / "philly_vc.csv"
# The budget tree used by the demo data and the simulator's Philly runs: three programs
# grouping the 11 sized VCs, shares proportional to VC size (floored to 0.01 % so siblings
# never sum past 100 %); the four tiny VCs of the job trace are left unbudgeted.
PHILLY_BUDGETS = TRACES_DIR / "philly_budgets.json"

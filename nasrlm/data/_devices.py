"""Names that the NB201 and FBNet catalogues share: HW-NAS-Bench's devices (as HELP names its latency
columns) and the zero-cost proxies that score better when lower.

Both spaces come from HW-NAS-Bench, measured on the same devices; FBNet has no published accuracy, so its
proxies take their direction from NB201's.
"""

from __future__ import annotations

#: GPU column prefix -> device; each is measured at three batch sizes (NB201: 1/32/256, FBNet: 1/32/64).
GPUS = {"1080ti": "NVIDIA GTX 1080 Ti", "2080ti": "NVIDIA RTX 2080 Ti", "titan_rtx": "NVIDIA Titan RTX",
        "titanx": "NVIDIA GTX Titan X", "titanxp": "NVIDIA Titan Xp"}
#: batch-1 device column -> "device; note" (the note, if any, goes into the description in parentheses).
BATCH1_DEVICES = {
    "gold_6226": "Intel Xeon Gold 6226 CPU", "gold_6240": "Intel Xeon Gold 6240 CPU",
    "silver_4114": "Intel Xeon Silver 4114 CPU", "silver_4210r": "Intel Xeon Silver 4210R CPU",
    "pixel2": "Google Pixel 2 phone; whole ms", "pixel3": "Google Pixel 3 phone",
    "essential_ph_1": "Essential PH-1 phone; whole ms", "samsung_a50": "Samsung Galaxy A50 phone; whole ms",
    "samsung_s7": "Samsung Galaxy S7 phone; whole ms", "raspi4": "Raspberry Pi 4",
    "eyeriss": "Eyeriss ASIC; estimated by HW-NAS-Bench, not measured",
    "fpga": "FPGA accelerator; estimated by HW-NAS-Bench, not measured",
}
#: proxies that correlate negatively with accuracy in NB201's zero_cost_725.csv (Spearman vs val_accuracy).
ZC_LOWER_IS_BETTER = {"plain"}  # -0.26 on the 725 CIFAR-10 cells

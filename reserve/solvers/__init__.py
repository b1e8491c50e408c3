"""Solvers: arrays in, arrays out; no geographic imports (STYLE principle 3)."""

from reserve.solvers.aatp import AATP
from reserve.solvers.multi import MultiSVM, MultiTTK
from reserve.solvers.svm import SVM
from reserve.solvers.svmperf import SVMPerf
from reserve.solvers.toppush import TopPush
from reserve.solvers.tsvm import TSVM
from reserve.solvers.ttk import TTK

__all__ = ["AATP", "SVM", "TSVM", "TTK", "MultiSVM", "MultiTTK", "SVMPerf", "TopPush"]

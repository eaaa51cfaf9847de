"""Calibration and real-to-sim: camera intrinsics, hand-eye, a versioned calibration store, and
system identification of the FR3's joint dynamics.

Importing ``calibration`` is light (no OpenCV, MuJoCo or franky); each module imports what it needs.

- ``calibration.intrinsics`` - ChArUco detection, ``calibrateCamera``, per-view errors, outliers, coverage
- ``calibration.handeye`` - eye-in-hand / eye-to-hand with every OpenCV method, residuals, safe pose plans
- ``calibration.store`` - versioned calibration records (JSON) with residuals, data hash and validity
- ``calibration.sysid`` - fit damping, friction loss, armature and payload to recorded trajectories
- ``calibration.excitation`` - sum-of-sines excitation inside the safety limits, recorded through franky
- ``calibration.scene`` - a MuJoCo scene with a ChArUco board and cameras at known poses (ground truth)
"""

"""A real camera through OpenCV ``VideoCapture`` (a device index, a ``/dev/video*`` path, a file or URL)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlinf_robot.errors import MissingDependency
from rlinf_robot.robot.cameras.base import Camera


class OpenCVCamera(Camera):
    def __init__(self, device: str | int = 0, width: int = 0, height: int = 0, loop: bool = True):
        #: "0" -> device index 0; anything else is a path or URL.
        self.device = int(device) if isinstance(device, str) and device.isdigit() else device
        self.width, self.height = int(width), int(height)
        self.loop = loop  # rewind a video file at its end (replaying a recording)
        self._cap: Any = None

    def open(self) -> None:
        try:
            import cv2
        except ImportError as exc:
            raise MissingDependency("opencv-python-headless", extra="calibration") from exc
        cap = cv2.VideoCapture(self.device)
        if not cap.isOpened():
            raise OSError(f"cannot open camera {self.device!r}")
        if self.width and self.height:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
        self._cap = cap

    def read(self, joint_positions: np.ndarray | None = None) -> np.ndarray:
        import cv2

        if self._cap is None:
            raise OSError("camera not open")
        ok, frame = self._cap.read()
        if not ok and self.loop:
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = self._cap.read()
        if not ok:
            raise OSError(f"camera {self.device!r} returned no frame")
        return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)

    def close(self) -> None:
        cap, self._cap = self._cap, None
        if cap is not None:
            cap.release()

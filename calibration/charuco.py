"""The ChArUco board: its geometry, its printable image, and detecting it in a camera image.

A ChArUco board is a chessboard whose white squares carry ArUco markers: the markers make every
corner identifiable (partial views still calibrate), the chessboard corners give sub-pixel
accuracy. Board frame (OpenCV's): origin at the board's top-left outer corner, x along the
columns, y down the rows, z into the board.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.errors import ConfigError, MissingDependency


def _cv2():
    try:
        import cv2
    except ImportError as exc:  # pragma: no cover - part of the calibration extra
        raise MissingDependency("opencv-python-headless", extra="calibration") from exc
    if not hasattr(cv2, "aruco") or not hasattr(cv2.aruco, "CharucoDetector"):
        raise MissingDependency(
            "opencv-python-headless>=4.7 (cv2.aruco.CharucoDetector)", extra="calibration"
        )
    return cv2


@dataclass(frozen=True)
class BoardSpec:
    """Squares per side, square and marker edge (m), ArUco dictionary name."""

    squares_x: int = 7
    squares_y: int = 5
    square_length: float = 0.04
    marker_length: float = 0.03
    dictionary: str = "DICT_5X5_100"

    def __post_init__(self):
        if not (3 <= self.squares_x <= 40 and 3 <= self.squares_y <= 40):
            raise ConfigError(f"board squares must be in [3, 40], got {self.squares_x}x{self.squares_y}")
        if not 0 < self.marker_length < self.square_length:
            raise ConfigError("board marker_length must be positive and smaller than square_length")

    @property
    def size_m(self) -> tuple[float, float]:
        return self.squares_x * self.square_length, self.squares_y * self.square_length

    @property
    def n_corners(self) -> int:
        return (self.squares_x - 1) * (self.squares_y - 1)

    def board(self):
        cv2 = _cv2()
        try:
            dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        except AttributeError:
            raise ConfigError(f"unknown ArUco dictionary {self.dictionary!r}") from None
        return cv2.aruco.CharucoBoard(
            (self.squares_x, self.squares_y), self.square_length, self.marker_length, dictionary
        )

    def image(self, px_per_square: int = 200) -> np.ndarray:
        """The board as a grayscale image, edge to edge (no margin), for printing or texturing."""
        w, h = self.squares_x * px_per_square, self.squares_y * px_per_square
        return self.board().generateImage((w, h), marginSize=0, borderBits=1)

    def corners(self) -> np.ndarray:
        """All chessboard corners in the board frame, [n_corners, 3], index = corner id."""
        return np.asarray(self.board().getChessboardCorners(), dtype=np.float64).reshape(-1, 3)

    def to_dict(self) -> dict:
        return {
            "squares_x": self.squares_x,
            "squares_y": self.squares_y,
            "square_length": self.square_length,
            "marker_length": self.marker_length,
            "dictionary": self.dictionary,
        }


@dataclass(frozen=True)
class Detection:
    """Corners found in one image: ids, image points [N, 2] (px), board points [N, 3] (m)."""

    ids: np.ndarray
    image_points: np.ndarray
    object_points: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


class CharucoFinder:
    """Reusable detector (building OpenCV's detector once saves ~1 ms per image)."""

    def __init__(self, spec: BoardSpec = BoardSpec(), min_corners: int = 6):
        self.spec = spec
        self.min_corners = min_corners
        self._board = spec.board()
        self._detector = _cv2().aruco.CharucoDetector(self._board)
        self._corners = spec.corners()

    def detect(self, image: np.ndarray) -> Detection | None:
        """Detect the board; None when fewer than ``min_corners`` corners are found."""
        cv2 = _cv2()
        img = np.asarray(image)
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 else img
        corners, ids, _, _ = self._detector.detectBoard(gray)
        if ids is None or len(ids) < self.min_corners:
            return None
        ids = ids.reshape(-1).astype(np.int64)
        return Detection(ids, corners.reshape(-1, 2).astype(np.float64), self._corners[ids])

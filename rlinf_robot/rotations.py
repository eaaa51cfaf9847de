"""Rotations: quaternions (w, x, y, z), rotation vectors and matrices, batched over leading axes.

The one rotations module of the project (robot side, sims, calibration). Pure numpy, so the robot
PC can import it. Every function takes a single value (``[4]``, ``[3]``, ``[3, 3]``) or a batch
(``[..., 4]``, ...) and returns the same leading shape. Quaternions are w-first, as on the wire and
in MuJoCo.
"""

from __future__ import annotations

import math

import numpy as np

#: The gripper-down orientation (180 deg about x). TCP quaternions are signed so that q . DOWN >= 0:
#: continuous where the TCP spends its life, where "w >= 0" would flip sign at random.
DOWN = np.array([0.0, 1.0, 0.0, 0.0])
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b (apply b, then a)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, np.float64), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    return np.asarray(q, np.float64) * np.array([1.0, -1.0, -1.0, -1.0])


def quat_normalize(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, np.float64)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def canonical(q: np.ndarray, ref: np.ndarray = DOWN) -> np.ndarray:
    """Unit quaternions with the sign that makes q . ref >= 0."""
    q = quat_normalize(q)
    return q * np.where(q @ ref < 0, -1.0, 1.0)[..., None]


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` [..., 3] by unit quaternions ``q`` [..., 4]."""
    v = np.asarray(v, np.float64)
    vq = np.concatenate([np.zeros(v.shape[:-1] + (1,)), v], axis=-1)
    return quat_multiply(quat_multiply(q, vq), quat_conjugate(q))[..., 1:]


def quat_from_rotvec(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    axis = v / np.maximum(angle, 1e-12)
    q = np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=-1)
    return np.where(angle > 1e-12, q, IDENTITY)


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """The rotation vector of ``q`` (the shorter way round: angle <= pi)."""
    q = quat_normalize(q)
    q = q * np.where(q[..., :1] < 0, -1.0, 1.0)
    s = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    return np.where(s > 1e-12, q[..., 1:] * angle / np.maximum(s, 1e-12), 2.0 * q[..., 1:])


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """Rotation angle (rad) between two orientations."""
    d = np.abs(np.sum(quat_normalize(a) * quat_normalize(b), axis=-1))
    out = 2.0 * np.arccos(np.minimum(1.0, d))
    return float(out) if np.ndim(out) == 0 else out


def rotvec_between(q_from: np.ndarray, q_to: np.ndarray) -> np.ndarray:
    """Base-frame rotation vector r with q_to = quat(r) * q_from (the shorter way round)."""
    return quat_to_rotvec(quat_multiply(q_to, quat_conjugate(q_from)))


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(quat_normalize(q), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def quat_from_matrix(m: np.ndarray) -> np.ndarray:
    """Rotation matrices [..., 3, 3] to unit quaternions with w >= 0 (Shepperd's method: the
    largest of the four candidates is computed first, so it is accurate at every angle)."""
    m = np.asarray(m, np.float64)
    if m.shape == (3, 3):
        return _quat_from_one_matrix(m)
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    tr = np.trace(m, axis1=1, axis2=2)
    diag = np.stack([m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], axis=1)
    pick = np.argmax(np.concatenate([tr[:, None], diag], axis=1), axis=1)
    q = np.empty((len(m), 4))
    for k in range(4):
        rows = pick == k
        if not rows.any():
            continue
        r = m[rows]
        if k == 0:
            s = 2.0 * np.sqrt(1.0 + tr[rows])
            q[rows] = np.stack(
                [
                    0.25 * s,
                    (r[:, 2, 1] - r[:, 1, 2]) / s,
                    (r[:, 0, 2] - r[:, 2, 0]) / s,
                    (r[:, 1, 0] - r[:, 0, 1]) / s,
                ],
                axis=1,
            )
            continue
        i = k - 1
        j, m2 = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[:, i, i] - r[:, j, j] - r[:, m2, m2])
        out = np.empty((len(r), 4))
        out[:, 0] = (r[:, m2, j] - r[:, j, m2]) / s
        out[:, 1 + i] = 0.25 * s
        out[:, 1 + j] = (r[:, j, i] + r[:, i, j]) / s
        out[:, 1 + m2] = (r[:, m2, i] + r[:, i, m2]) / s
        q[rows] = out
    q = q * np.where(q[:, :1] < 0, -1.0, 1.0)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(*shape, 4)


def _quat_from_one_matrix(m: np.ndarray) -> np.ndarray:
    """``quat_from_matrix`` of one matrix in plain floats: the same candidates (4 q_k^2 and the
    sums / differences beside it, scaled by the normalization), ~2 us instead of the ~80 us numpy
    spends on a batch of one. The bridge and the arm driver convert one pose per control step."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = m.tolist()
    tw, tx, ty, tz = (
        1.0 + m00 + m11 + m22,
        1.0 + m00 - m11 - m22,
        1.0 - m00 + m11 - m22,
        1.0 - m00 - m11 + m22,
    )
    a, b, c = m21 - m12, m02 - m20, m10 - m01
    d, e, f = m01 + m10, m02 + m20, m12 + m21
    best = max(tw, tx, ty, tz)
    if best == tw:
        q = (tw, a, b, c)
    elif best == tx:
        q = (a, tx, d, e)
    elif best == ty:
        q = (b, d, ty, f)
    else:
        q = (c, e, f, tz)
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if q[0] < 0:
        norm = -norm
    return np.array([q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm])


def rotvec_to_matrix(r: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation vectors [..., 3] -> matrices [..., 3, 3]."""
    r = np.asarray(r, np.float64)
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    axis = r / np.maximum(angle, 1e-12)
    x, y, z = np.moveaxis(axis, -1, 0)
    zero = np.zeros_like(x)
    k = np.stack([np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1), np.stack([-y, x, zero], -1)], -2)
    s, c = np.sin(angle)[..., None], np.cos(angle)[..., None]
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def matrix_to_rotvec(m: np.ndarray) -> np.ndarray:
    return quat_to_rotvec(quat_from_matrix(m))


def small_rotation_error(r_target: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Rotation vector taking ``r`` to ``r_target`` from the skew part of ``r_target r^T``: exact to
    first order, which is all a Jacobian step needs (and cheaper than the log map)."""
    e = np.asarray(r_target) @ np.swapaxes(np.asarray(r), -1, -2)
    return 0.5 * np.stack(
        [e[..., 2, 1] - e[..., 1, 2], e[..., 0, 2] - e[..., 2, 0], e[..., 1, 0] - e[..., 0, 1]], -1
    )


def is_rigid(pose) -> bool:
    """Whether ``pose`` is a finite 4x4 rigid transform (orthonormal rotation, last row 0 0 0 1)."""
    try:
        t = np.asarray(pose, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return bool(
        t.shape == (4, 4)
        and np.all(np.isfinite(t))
        and np.allclose(t[3], [0, 0, 0, 1])
        and np.allclose(t[:3, :3] @ t[:3, :3].T, np.eye(3), atol=1e-6)
        and np.linalg.det(t[:3, :3]) > 0
    )

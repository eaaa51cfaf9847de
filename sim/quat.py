"""Batched quaternion helpers (w x y z, numpy [N, 4]) shared by the sim envs and adapters."""

from __future__ import annotations

import numpy as np

#: The gripper-down orientation: TCP quaternions are signed so that q . DOWN >= 0 (see
#: rlinf_robot.envs.spec.ROBOT_STATE_FIELDS) - continuous where the TCP spends its time.
DOWN = np.array([0.0, 1.0, 0.0, 0.0])


def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def qconj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def qrotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors v [N, 3] by unit quaternions q [N, 4]."""
    vq = np.concatenate([np.zeros(v.shape[:-1] + (1,)), v], axis=-1)
    return qmul(qmul(q, vq), qconj(q))[..., 1:]


def canonical(q: np.ndarray, ref: np.ndarray = DOWN) -> np.ndarray:
    """Unit quaternions with the sign that makes q . ref >= 0."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return q * np.where(q @ ref < 0, -1.0, 1.0)[..., None]


def rotvec_to_matrix(r: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation vectors [N, 3] -> matrices [N, 3, 3]."""
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    axis = r / np.maximum(angle, 1e-12)
    x, y, z = np.moveaxis(axis, -1, 0)
    zero = np.zeros_like(x)
    k = np.stack([np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1), np.stack([-y, x, zero], -1)], -2)
    s, c = np.sin(angle)[..., None], np.cos(angle)[..., None]
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def rotvec_between(q_from: np.ndarray, q_to: np.ndarray) -> np.ndarray:
    """World-frame rotation vector r with q_to = quat(r) * q_from (the shorter way round)."""
    rel = qmul(q_to, qconj(q_from))
    rel = rel * np.where(rel[..., :1] < 0, -1.0, 1.0)
    s = np.linalg.norm(rel[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, rel[..., :1])
    return rel[..., 1:] * np.where(s > 1e-9, angle / np.maximum(s, 1e-12), 2.0)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Unit quaternions [N, 4] (w x y z) -> rotation matrices [N, 3, 3]."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def matrix_to_quat(m: np.ndarray) -> np.ndarray:
    """Rotation matrices [N, 3, 3] -> unit quaternions [N, 4] (w x y z, w >= 0)."""
    m00, m01, m02 = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    m10, m11, m12 = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    m20, m21, m22 = m[:, 2, 0], m[:, 2, 1], m[:, 2, 2]
    w = 0.5 * np.sqrt(np.maximum(0.0, 1.0 + m00 + m11 + m22))
    x = 0.5 * np.sqrt(np.maximum(0.0, 1.0 + m00 - m11 - m22)) * np.copysign(1.0, m21 - m12)
    y = 0.5 * np.sqrt(np.maximum(0.0, 1.0 - m00 + m11 - m22)) * np.copysign(1.0, m02 - m20)
    z = 0.5 * np.sqrt(np.maximum(0.0, 1.0 - m00 - m11 + m22)) * np.copysign(1.0, m10 - m01)
    q = np.stack([w, x, y, z], axis=1)
    return q / np.linalg.norm(q, axis=1, keepdims=True)

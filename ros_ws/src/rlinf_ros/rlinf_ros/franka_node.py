"""``franka_node``: a lifecycle node around ``rlinf_robot.robot.franka.FrankaArm``.

configure: connect to the arm (retrying up to ``connect_timeout_s``); activate: publish the state
and accept commands; deactivate: hold; cleanup: disconnect. Namespace ``franka`` by default:

- publishes ``joint_states`` (sensor_msgs/JointState, fr3_joint1..7 + fr3_finger_joint1, at
  ``control_rate_hz``), ``ee_pose`` (geometry_msgs/PoseStamped, the TCP by our FK) and
  ``/diagnostics`` (state machine state, counters, loop timing; also while inactive);
- subscribes ``joint_command`` (JointState: absolute positions by joint name) and ``ee_command``
  (PoseStamped in ``base_frame``); a command whose header stamp is older than ``deadman_ms`` or
  older than the last stop or hold is never executed;
- serves std_srvs/Trigger ``reset``, ``recover``, ``stop`` (latching e-stop), ``hold`` (stop
  smoothly where the motion can stop, without reversing; not latching: commands issued before it
  are refused, newer ones move the arm again) and ``home``. ``home``, ``reset`` and ``recover``
  wait for the arm, so they are served by sibling nodes on their own threads (``side_services``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from rlinf_robot.errors import ConfigError, LinkLost, MissingDependency
from rlinf_robot.robot import make_robot
from rlinf_robot.robot.franka import ArmObservation, ArmState, FrankaArm, FrankaConfig
from rlinf_robot.robot.franka.goals import joint_targets_by_name
from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, JOINT_NAMES
from rlinf_robot.safety import ArmAction, Rejection
from rlinf_ros.common import LATEST, declare, from_stamp, run_node, to_stamp
from rlinf_ros.side_services import SideServices

NODE_PARAMS = {"diagnostics_rate_hz": 5.0, "base_frame": "fr3_link0"}
LEVELS = {
    ArmState.ACTIVE: DiagnosticStatus.OK,
    ArmState.IDLE: DiagnosticStatus.OK,
    ArmState.REFLEX: DiagnosticStatus.WARN,
    ArmState.RECOVERING: DiagnosticStatus.WARN,
    ArmState.DISCONNECTED: DiagnosticStatus.WARN,
    ArmState.LATCHED: DiagnosticStatus.ERROR,
    ArmState.ESTOP: DiagnosticStatus.ERROR,
}


def _config_defaults() -> dict:
    return {f.name: f.default for f in dataclasses.fields(FrankaConfig) if f.name != "extra"}


class FrankaNode(LifecycleNode):
    def __init__(self) -> None:
        super().__init__("franka_node")
        self.params = declare(self, {**_config_defaults(), **NODE_PARAMS})
        self.arm: FrankaArm | None = None
        self._active = False
        self._js = self._pose = None
        self._subs = []
        # Diagnostics and the stop service exist in every lifecycle state: an operator must always
        # see the arm and be able to stop it.
        self._diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        rate = float(self.params["diagnostics_rate_hz"])
        self.create_timer(1.0 / rate if rate > 0 else 1.0, self._publish_diagnostics)
        for name, handler in (("stop", self._srv_stop), ("hold", self._srv_hold)):  # one loop tick at most
            self.create_service(Trigger, name, handler)
        # Services that wait for the arm run beside the executor, each group on its own thread:
        # homing (up to 30 s) never delays a reset, and neither delays commands or stop.
        homing, recovery = SideServices(self, "homing"), SideServices(self, "recovery")
        homing.add(Trigger, "home", self._srv_home)
        recovery.add(Trigger, "reset", self._srv_reset)
        recovery.add(Trigger, "recover", self._srv_recover)
        self._side = [homing, recovery]
        self.add_on_set_parameters_callback(self._on_set_parameters)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            arm = make_robot("franka", **{k: v for k, v in self.params.items() if k not in NODE_PARAMS})
            arm.connect()
            config = arm.config
        except (ConfigError, LinkLost, MissingDependency) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.arm = arm
        qos = QoSProfile(depth=10)
        self._js = self.create_lifecycle_publisher(JointState, "joint_states", qos)
        self._pose = self.create_lifecycle_publisher(PoseStamped, "ee_pose", qos)
        self._subs = [
            self.create_subscription(JointState, "joint_command", self._on_joint_command, LATEST),
            self.create_subscription(PoseStamped, "ee_command", self._on_ee_command, LATEST),
        ]
        arm.add_listener(self._publish_state)
        self.get_logger().info(f"connected to the arm at {config.robot_ip} ({config.control_rate_hz:g} Hz)")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.arm.activate()
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.arm.deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        for pub in (self._js, self._pose):
            if pub is not None:
                self.destroy_lifecycle_publisher(pub)
        self._js = self._pose = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Hold the arm, stop streaming and disconnect (also on SIGINT/SIGTERM, from ``run_node``,
        while the ROS context still works). A moving arm brakes to where it can stop (never driven
        back) and is left at rest before the control loop ends."""
        self._active = False
        arm, self.arm = self.arm, None
        if arm is None:
            return
        if arm.state is ArmState.ACTIVE:
            ok, why = arm.hold("node shutting down")
            if ok:
                _wait_at_rest(arm, RELEASE_REST_TIMEOUT_S)
            else:
                self.get_logger().warning(f"hold before disconnect failed: {why}")
        arm.disconnect()

    def destroy_node(self) -> None:
        for side in self._side:
            side.close()
        self._side = []
        super().destroy_node()

    # ------------------------------------------------------------------ state out
    def _publish_state(self, obs: ArmObservation) -> None:
        if not self._active or self._js is None:
            return
        stamp = to_stamp(obs.wall)
        js = JointState()
        js.header.stamp = stamp
        js.name = [*JOINT_NAMES, FINGER_JOINT_NAME]
        half = obs.gripper_width / 2.0 if math.isfinite(obs.gripper_width) else 0.0
        js.position = [*obs.q.tolist(), half]
        js.velocity = [*obs.dq.tolist(), 0.0]
        self._js.publish(js)
        pose = PoseStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = self.params["base_frame"]
        p, q = obs.ee_pose[:3], obs.ee_pose[3:]
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (float(v) for v in p)
        pose.pose.orientation.w, pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z = (
            float(v) for v in q
        )
        self._pose.publish(pose)

    def _publish_diagnostics(self) -> None:
        arm = self.arm
        status = DiagnosticStatus(
            name=f"{self.get_namespace().rstrip('/')}/{self.get_name()}: arm",
            hardware_id=str(self.params["robot_ip"]),
        )
        if arm is None:
            status.level, status.message = DiagnosticStatus.WARN, "unconfigured"
            status.values = [KeyValue(key="state", value="UNCONFIGURED")]
        else:
            diag = arm.diagnostics()
            status.level = LEVELS[arm.state]
            status.message = f"{diag['state']}: {diag['last_cause']}"
            status.values = [KeyValue(key=str(k), value=_fmt(v)) for k, v in diag.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag.publish(msg)

    # ------------------------------------------------------------------ commands in
    def _on_joint_command(self, msg: JointState) -> None:
        arm = self.arm
        obs = arm.observation if arm is not None else None
        if obs is None:
            return
        parsed = joint_targets_by_name(list(msg.name), list(msg.position), obs.q_d)
        if isinstance(parsed, Rejection):
            self._report(arm.refuse(parsed))
            return
        stamp = self._stamp(arm, msg)
        if stamp is not None:
            target, gripper = parsed
            self._report(arm.submit(ArmAction("joint_position", target, gripper), stamp))

    def _on_ee_command(self, msg: PoseStamped) -> None:
        arm = self.arm
        if arm is None:
            return
        frame = msg.header.frame_id
        if frame not in ("", self.params["base_frame"]):
            expected = self.params["base_frame"]
            self._report(
                arm.refuse(Rejection("frame", f"ee_command in frame {frame!r}, expected {expected!r}"))
            )
            return
        stamp = self._stamp(arm, msg)
        if stamp is not None:
            p, o = msg.pose.position, msg.pose.orientation
            values = [p.x, p.y, p.z, o.w, o.x, o.y, o.z]
            self._report(arm.submit(ArmAction("ee_target", values), stamp))

    def _stamp(self, arm: FrankaArm, msg) -> float | None:
        """The command's wall-clock stamp; an unset one is refused (counted), since a command whose
        age cannot be known could be any age (the deadman could not cut it off)."""
        stamp = from_stamp(msg.header.stamp)
        if stamp is None:
            self._report(
                arm.refuse(Rejection("bad_stamp", "header.stamp is unset: stamp commands with the clock"))
            )
        return stamp

    def _report(self, verdict) -> None:
        if isinstance(verdict, Rejection) and verdict.reason != "not_active":
            self.get_logger().warning(
                f"command rejected ({verdict.reason}): {verdict.detail}", throttle_duration_sec=1.0
            )

    # ------------------------------------------------------------------ services
    def _srv_stop(self, request, response):
        if self.arm is None:
            response.success, response.message = False, "not configured"
            return response
        self.arm.stop("stop service")
        response.success, response.message = True, "stopped: latched until reset"
        return response

    def _srv_hold(self, request, response):
        return self._answer(response, lambda arm: arm.hold("hold service"))

    def _srv_reset(self, request, response):
        return self._answer(response, lambda arm: arm.reset())

    def _srv_recover(self, request, response):
        return self._answer(response, lambda arm: arm.recover())

    def _srv_home(self, request, response):
        return self._answer(response, lambda arm: arm.home())

    def _answer(self, response, call):
        if self.arm is None:
            response.success, response.message = False, "not configured"
        else:
            response.success, response.message = call(self.arm)
        return response

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == "relative_dynamics_factor":
                value = p.value
                if not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
                    return SetParametersResult(
                        successful=False, reason="relative_dynamics_factor must be in (0, 1]"
                    )
                if self.arm is not None:
                    self.arm.set_dynamics_factor(float(value))
            elif p.name in self.params and self.arm is not None:
                return SetParametersResult(
                    successful=False, reason=f"{p.name} applies at configure: cleanup and configure again"
                )
        for p in params:
            if p.name in self.params:
                self.params[p.name] = p.value
        return SetParametersResult(successful=True)


#: How long ``release`` waits for a braking arm to come to rest before it disconnects (s).
RELEASE_REST_TIMEOUT_S = 2.0
_REST_RAD_S = 1e-3


def _wait_at_rest(arm: FrankaArm, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        obs = arm.observation
        if obs is None or float(np.max(np.abs(obs.dq))) < _REST_RAD_S:
            return True
        time.sleep(0.01)
    return False


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


#: GIL switch interval (s). The control loop shares the interpreter with the executor thread; at
#: Python's default 5 ms every GIL hand-over can cost the loop a whole period at 200 Hz.
SWITCH_INTERVAL_S = 2e-4


def main(args=None) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # Fast DDS sends from the publishing thread (our real-time control loop) instead of handing
    # each sample to its own normal-priority writer thread, which a busy machine delays.
    os.environ.setdefault("RMW_FASTRTPS_PUBLICATION_MODE", "SYNCHRONOUS")
    raise SystemExit(run_node(FrankaNode, args))


if __name__ == "__main__":
    main()

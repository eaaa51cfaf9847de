"""Robot PC bring-up against franka-sim (no arm): ``ros2 launch launch/sim_robot.launch.py``.

Starts the franka-sim service (``python -m rlinf_robot.robot.franka.sim_service``, configured by
the YAML's ``franka_sim`` block; it waits for the machine-wide franka-sim lock and restarts the
server if it dies), then the same rlinf_ros nodes as ``robot.launch.py`` with parameters from
``config`` (default ``launch/config/sim_robot.yaml``). ``franka_node`` retries its connection for
``connect_timeout_s``, so it comes up once the simulator does. ``rlinf-robot robot up --sim``
starts the same processes from the same YAML.
"""

import sys
from pathlib import Path

from launch.actions import DeclareLaunchArgument, EmitEvent, ExecuteProcess, RegisterEventHandler
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

from launch import LaunchDescription

CONFIG = Path(__file__).resolve().parent / "config" / "sim_robot.yaml"
SIM_SERVICE = "rlinf_robot.robot.franka.sim_service"


def autostart(node: LifecycleNode) -> list:
    """Configure ``node`` once it runs, and activate it once it is inactive."""
    configure = EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node),
                                            transition_id=Transition.TRANSITION_CONFIGURE))
    activate = RegisterEventHandler(OnStateTransition(
        target_lifecycle_node=node, start_state="configuring", goal_state="inactive",
        entities=[EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node),
                                              transition_id=Transition.TRANSITION_ACTIVATE))],
    ))
    return [activate, configure]


def generate_launch_description() -> LaunchDescription:
    config = LaunchConfiguration("config")
    namespace = LaunchConfiguration("namespace")
    franka_sim = ExecuteProcess(
        cmd=[sys.executable, "-m", SIM_SERVICE, "--config", config], name="franka_sim", output="screen",
    )
    franka = LifecycleNode(
        package="rlinf_ros", executable="franka_node", name="franka_node", namespace=namespace,
        parameters=[config, {"robot_ip": LaunchConfiguration("robot_ip")}], output="screen",
    )
    camera = Node(
        package="rlinf_ros", executable="camera_node", name="camera_node", namespace=namespace,
        parameters=[config], output="screen",
    )
    bridge = Node(
        package="rlinf_ros", executable="bridge_node", name="bridge_node", namespace=namespace,
        parameters=[config], output="screen",
    )
    return LaunchDescription([
        DeclareLaunchArgument("robot_ip", default_value="127.0.0.1", description="franka-sim's FCI address"),
        DeclareLaunchArgument("config", default_value=str(CONFIG), description="parameter YAML of every process"),
        DeclareLaunchArgument("namespace", default_value="franka", description="namespace of the nodes"),
        franka_sim,
        franka,
        camera,
        bridge,
        *autostart(franka),
    ])

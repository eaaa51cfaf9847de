"""Robot PC bring-up for a real FR3: ``ros2 launch launch/robot.launch.py robot_ip:=172.16.0.2``.

Starts the rlinf_ros nodes with their parameters from ``config`` (default
``launch/config/robot.yaml``) in ``namespace`` (default ``franka``), then configures and activates
the lifecycle ``franka_node``. ``rlinf-robot robot up --config launch/config/robot.yaml`` starts
the same executables from the same YAML where ``ros2 launch`` is not available.
Build and source the workspace first: ``colcon build`` (``make setup``), ``source ros_ws/install/setup.bash``.
"""

from pathlib import Path

from launch.actions import (DeclareLaunchArgument, EmitEvent, RegisterEventHandler, SetEnvironmentVariable,
                            UnsetEnvironmentVariable)
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

from launch import LaunchDescription

CONFIG = Path(__file__).resolve().parent / "config" / "robot.yaml"
# The ROS graph on 127.0.0.1 only, as `robot up` runs it (the file says why; dds_profile:= another)
DDS_PROFILE = Path(__file__).resolve().parent / "config" / "fastdds_loopback.xml"


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
        DeclareLaunchArgument("robot_ip", default_value="172.16.0.2", description="the arm's FCI address"),
        DeclareLaunchArgument("config", default_value=str(CONFIG), description="parameter YAML of every node"),
        DeclareLaunchArgument("namespace", default_value="franka", description="namespace of the nodes"),
        DeclareLaunchArgument("dds_profile", default_value=str(DDS_PROFILE), description="Fast DDS profile"),
        SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", LaunchConfiguration("dds_profile")),
        # with a discovery range set, rmw_fastrtps opens sockets on 0.0.0.0 beside the profile's
        UnsetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE"),
        franka,
        camera,
        bridge,
        *autostart(franka),
    ])

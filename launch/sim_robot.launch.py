"""Robot PC bring-up against franka-sim (no arm): ``ros2 launch launch/sim_robot.launch.py``.

Starts the franka-sim service (``python -m rlinf_robot.robot.franka.sim_service``, configured by
the YAML's ``franka_sim`` block; it waits for the machine-wide franka-sim lock and restarts the
server if it dies), then includes ``robot.launch.py`` for the rlinf_ros nodes, handing it
``config`` (default ``launch/config/sim_robot.yaml``), ``robot_ip`` and ``namespace``. ``franka_node`` retries its connection for
``connect_timeout_s``, so it comes up once the simulator does. ``rlinf-robot robot up --sim``
starts the same processes from the same YAML.
"""

import sys
from pathlib import Path

from launch.actions import DeclareLaunchArgument, ExecuteProcess, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "config" / "sim_robot.yaml"
ROBOT_LAUNCH = HERE / "robot.launch.py"  # the nodes, declared once for the arm and for the simulator
SIM_SERVICE = "rlinf_robot.robot.franka.sim_service"


def generate_launch_description() -> LaunchDescription:
    config = LaunchConfiguration("config")
    franka_sim = ExecuteProcess(
        cmd=[sys.executable, "-m", SIM_SERVICE, "--config", config], name="franka_sim", output="screen",
    )
    nodes = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(ROBOT_LAUNCH)),
        launch_arguments={
            "robot_ip": LaunchConfiguration("robot_ip"),
            "config": config,
            "namespace": LaunchConfiguration("namespace"),
        }.items(),
    )
    return LaunchDescription([
        DeclareLaunchArgument("robot_ip", default_value="127.0.0.1", description="franka-sim's FCI address"),
        DeclareLaunchArgument("config", default_value=str(CONFIG), description="parameter YAML of every process"),
        DeclareLaunchArgument("namespace", default_value="franka", description="namespace of the nodes"),
        franka_sim,
        nodes,
    ])

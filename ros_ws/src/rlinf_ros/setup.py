"""ament_python package ``rlinf_ros``: the robot PC's ROS 2 nodes, built by ``colcon build``.

Each console script becomes ``install/rlinf_ros/lib/rlinf_ros/<executable>``, which is what the
launch files (``launch/*.launch.py``) and ``rlinf-robot robot up`` start. Add a node with one line.
"""

from setuptools import find_packages, setup

PACKAGE = "rlinf_ros"

#: "<executable> = <module>:<function>", one per node.
NODES = [
    "franka_node = rlinf_ros.franka_node:main",
    "camera_node = rlinf_ros.camera_node:main",
    "bridge_node = rlinf_ros.bridge_node:main",
]

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="rlinf-robot maintainers",
    description="ROS 2 nodes of rlinf-robot (Franka arm, cameras, ZMQ bridge)",
    license="Apache-2.0",
    entry_points={"console_scripts": NODES},
)

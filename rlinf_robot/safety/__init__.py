"""Robot-side safety: pure Python + numpy, no ROS, no torch.

``SafetyFilter`` checks every command against limits from YAML; ``Watchdog`` is the deadman;
``EStop`` is the latch that only an explicit reset clears.
"""

from rlinf_robot.safety.estop import EStop
from rlinf_robot.safety.filter import ArmAction, Rejection, RobotState, SafeAction, SafetyFilter
from rlinf_robot.safety.limits import DEFAULT_LIMITS_FILE, SafetyLimits
from rlinf_robot.safety.watchdog import Watchdog

__all__ = [
    "DEFAULT_LIMITS_FILE",
    "ArmAction",
    "EStop",
    "Rejection",
    "RobotState",
    "SafeAction",
    "SafetyFilter",
    "SafetyLimits",
    "Watchdog",
]

"""The Franka FR3 on franky: ``FrankaArm`` (driver), ``FrankaConfig``, ``FaultStateMachine``.

franky itself is imported only when the arm connects, so importing this package stays light.
"""

from rlinf_robot.robot.franka.arm import ArmObservation, FrankaArm
from rlinf_robot.robot.franka.config import FrankaConfig
from rlinf_robot.robot.franka.faults import ArmState, FaultStateMachine

__all__ = ["ArmObservation", "ArmState", "FaultStateMachine", "FrankaArm", "FrankaConfig"]

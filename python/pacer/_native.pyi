"""Type stubs of the compiled part of pacer (python/src/lib.rs). Use the functions of the
`pacer` package; these are what they call."""

from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

class PacerError(Exception):
    """Bad input (naming the file, field and expected value) or a simulation that could not run."""

class TaskSet:
    """A task set (docs/formats/taskset.md): periodic or sporadic tasks with C, D, T."""

    @staticmethod
    def from_json(text: str, source: str = "<string>") -> "TaskSet": ...
    @staticmethod
    def read(path: str) -> "TaskSet": ...
    def to_json(self) -> str: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def seed(self) -> Optional[int]: ...
    @property
    def utilization(self) -> float: ...
    def rows(self) -> List[Tuple[str, int, int, int, int]]:
        """(name, wcet_ns, deadline_ns, period_ns, offset_ns) per task."""
    def __len__(self) -> int: ...

class Workload:
    """An rt-app workload, as `pacer sim FILE` reads it."""

    @property
    def threads(self) -> List[str]: ...
    @property
    def duration_ns(self) -> Optional[int]: ...
    @property
    def ignored(self) -> List[str]: ...
    @property
    def source(self) -> str: ...

def parse_rtapp(text: str, source: str = "<string>", lenient: bool = False) -> Workload: ...
def generate_json(spec: str, count: int) -> List[TaskSet]: ...
def analyze_json(
    taskset: TaskSet, cpus: int, cluster_size: Optional[int] = None, milp: bool = True
) -> str: ...
def simulate(
    target: Union[TaskSet, Workload],
    cpus: int,
    policy: Optional[str] = None,
    cluster_size: Optional[int] = None,
    duration: Union[int, str, None] = None,
    seed: int = 1,
    controller: Optional[str] = None,
    controlled: Optional[List[str]] = None,
    jobs: bool = True,
    events: bool = False,
    trace: Optional[str] = None,
    assign: Optional[str] = None,
    reclaim: bool = False,
) -> Dict[str, Any]: ...

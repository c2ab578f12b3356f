"""What the tests read back from Spark's status tracker about a job's stages."""

import time

# How long the status tracker may lag the jobs it reports on, at most.
SETTLE_S = 30


def settled(sc, group):
    """Spark's status tracker for `sc` once every job of `group` has ended in
    it. The tracker learns of task and job ends from Spark's listener bus,
    after the action returned: read right away, a stage may count a task
    fewer than it ran. A job's end is posted after its tasks' ends, so once
    the tracker knows it ended, its stages' counts are whole."""
    tracker = sc.statusTracker()

    def ended(job):
        info = tracker.getJobInfo(job)
        return info is not None and info.status in ("SUCCEEDED", "FAILED")

    deadline = time.time() + SETTLE_S
    while not all(ended(j) for j in tracker.getJobIdsForGroup(group)):
        if time.time() > deadline:
            raise AssertionError(f"the jobs of {group} did not end in the status tracker")
        time.sleep(0.1)
    return tracker


def stage_attempts(sc, group):
    """The highest attempt number of each stage of the jobs in `group`."""
    tracker = settled(sc, group)
    out = {}
    for job in tracker.getJobIdsForGroup(group):
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            if info is not None:
                out[stage] = info.currentAttemptId
    return out

"""What the tests read back from Spark's status tracker about a job's stages."""


def stage_attempts(sc, group):
    """The highest attempt number of each stage of the jobs in `group`."""
    tracker = sc.statusTracker()
    out = {}
    for job in tracker.getJobIdsForGroup(group):
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            if info is not None:
                out[stage] = info.currentAttemptId
    return out

"""The pure decision core: functions of a snapshot and the time, nothing else."""

"""Sweeps (`eqdsl sweep sweep.yaml`): many runs — models × schedules × seeds × targets — as
independent tasks on local processes or a Ray cluster, merged into one table and plots."""

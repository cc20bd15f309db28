"""Slurm: allocations, job steps as a transport, batch scripts, following batch jobs."""

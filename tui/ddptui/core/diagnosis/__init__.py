"""Findings: what went wrong (or will), with evidence and a fix. Shared by preflight and live diagnosis."""

"""The full screens: picker, problems, playbook (step-through with node panes)."""

"""The widgets the playbook screen is made of: step list, node panes, checks matrix, findings."""

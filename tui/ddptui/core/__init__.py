"""The domain: playbooks, transports, checks, launch, logs. Never imports textual or rich."""

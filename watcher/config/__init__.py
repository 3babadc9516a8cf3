"""Reading what the user wrote: settings (file + env + ${VAR}), rule files and their models
with FILE:LINE errors, the rule index (``RuleSet``), the YAML reader with its limits."""

"""Reading what the user wrote: settings (file + env + ${VAR}), rule files with FILE:LINE
errors, the YAML reader with its limits, and `watcher check`."""

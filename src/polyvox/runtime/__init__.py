"""What every polyvox process runs with: its CPU budget (`cores`), its log format (`logs`), the metric files
processes share (`metrics_files`), its tracer (`otel`) and what a person sees of it starting (`startup`)."""

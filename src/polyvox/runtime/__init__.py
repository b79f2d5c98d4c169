"""What every polyvox process runs with: its CPU budget (`cores`), its log format (`logs`), the metric files
processes share (`metrics_files`), its tracer (`otel`), what a person sees of it starting (`startup`) and
its garbage collector while it starts (`heap`)."""

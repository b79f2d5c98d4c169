"""The engine core, the engine's upper half: a model of any family with its engine core, in a thread
of the server or in processes of its own (one per data-parallel rank); its own request, statistics
and messages. It knows nothing of the API side: the back end (backends/voxcpm.py) translates."""

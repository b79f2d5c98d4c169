"""The engine core: the batching engine behind VoxCPM2, in a thread of the server or in processes of its
own (one per data-parallel rank), with the messages that cross between them."""

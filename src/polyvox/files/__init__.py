"""Files polyvox keeps across upgrades and shares between servers: a directory's format version
(`dir_format`) and a file's identity for cheap change checks (`file_stamp`)."""

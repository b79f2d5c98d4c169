"""VoxCPM 1.x (VoxCPM-0.5B and VoxCPM 1.5): the VoxCPM2 stack with AudioVAE V1, LocDiT V1 and summed
(not concatenated) LM fusions, driven through the same batched-inference API as VoxCPM2."""

"""foveal.memory"""

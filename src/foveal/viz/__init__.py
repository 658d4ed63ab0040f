"""foveal.viz"""

"""foveal.data"""

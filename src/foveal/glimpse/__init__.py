"""foveal.glimpse"""

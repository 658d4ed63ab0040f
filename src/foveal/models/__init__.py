"""foveal.models"""

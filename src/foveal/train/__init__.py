"""foveal.train"""

"""performance"""

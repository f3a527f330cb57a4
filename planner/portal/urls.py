from django.urls import path

from planner.portal import views

urlpatterns = [path("", views.dashboard, name="dashboard")]

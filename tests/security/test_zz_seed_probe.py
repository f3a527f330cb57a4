import time, pytest
@pytest.mark.django_db
def test_seed():
    from tests.security.seed import seed_world
    t=time.time(); w = seed_world(); print("seed s", time.time()-t)
    print(w.home.run.status, w.home.run.error, w.home.sweep.status, list(w.home.objects))
    print(sorted((w.home.run.result or {}).keys()))
